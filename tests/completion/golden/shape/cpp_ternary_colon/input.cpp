int f(bool b) {
    return b ? 1 :<CURSOR>
}
