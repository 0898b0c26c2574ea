package main

func run(xs []int) {
	for _, x := range xs {
		x *= 2
	<CURSOR>	
		fmt.Println(x)
	}
}
