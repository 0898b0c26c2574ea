function add(a, b) {<CURSOR>}
