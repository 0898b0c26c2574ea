class A {
    int size() {<CURSOR>
}
