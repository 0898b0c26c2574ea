def load(path):<CURSOR>
