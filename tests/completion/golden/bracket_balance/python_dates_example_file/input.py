import datetime as dt


def parse_dates(rows):
    """Turn (year, month, day) rows into dates."""
    dates = []
    for year, month, day in rows:
        dates.append(<CURSOR>)
    return dates
