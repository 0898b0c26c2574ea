function report(items) {
	for (const item of items) {<CURSOR>
	console.log(`done: ${items.length}`);
}
