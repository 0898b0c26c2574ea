    dates.append(<CURSOR>)
