void f(int x) {
    if (x) {<CURSOR>
    }
}
