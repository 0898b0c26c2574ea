values = sorted(<CURSOR>)
