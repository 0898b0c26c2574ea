package main

func f(xs []int) int {
	s := 0
	<CURSOR>
	return s
}
