package main

func f() {
	x := 1
	<CURSOR>
}
