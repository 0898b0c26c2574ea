config = {
    'name':<CURSOR>
}
