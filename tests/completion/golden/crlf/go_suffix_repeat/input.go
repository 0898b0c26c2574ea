package main

func sum(xs []int) int {<CURSOR>
	return total
}
