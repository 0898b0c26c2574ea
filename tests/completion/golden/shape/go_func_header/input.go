package main

func add(a, b int) int {<CURSOR>
