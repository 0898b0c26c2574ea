console.log(<CURSOR>);
