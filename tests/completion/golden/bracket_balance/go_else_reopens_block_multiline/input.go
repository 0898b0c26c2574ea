package main

func sign(x int) string {
	if x < 0 {
		return "negative"
	<CURSOR>
	}
	return "zero"
}
