package main

func f(x int) {
	if x > <CURSOR> {
	}
}
