x = compute(1, 2)<CURSOR>
