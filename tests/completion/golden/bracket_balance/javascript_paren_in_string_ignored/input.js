log(<CURSOR>);
