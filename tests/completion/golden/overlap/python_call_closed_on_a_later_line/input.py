result = compute(
    value=<CURSOR>)
