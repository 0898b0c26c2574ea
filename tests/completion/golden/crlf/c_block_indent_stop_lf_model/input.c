int inc(int x) {<CURSOR>
