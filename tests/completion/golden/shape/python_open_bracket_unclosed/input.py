values = sorted(<CURSOR>
