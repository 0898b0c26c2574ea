dates.append(<CURSOR>)
