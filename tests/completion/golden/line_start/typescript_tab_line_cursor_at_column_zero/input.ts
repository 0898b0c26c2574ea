function double(x: number): number {
	const y = x * 2;
<CURSOR>	
	return y;
}
