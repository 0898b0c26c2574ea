s = 'if x:'<CURSOR>
