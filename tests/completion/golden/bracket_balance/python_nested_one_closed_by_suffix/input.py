print(len(<CURSOR>)
