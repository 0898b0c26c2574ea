# TODO: if this fails:<CURSOR>
x = 1
