export function price(items: number[]): number {
	let total = 0;
	for (const p of items) {
		total += p;
	}
	<CURSOR>
}
