def first_even(xs):<CURSOR>
