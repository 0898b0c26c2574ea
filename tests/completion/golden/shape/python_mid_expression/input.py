total = price * <CURSOR> + tax
