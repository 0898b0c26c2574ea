int main(void) {
	printf("%d %d\n",
	       a, <CURSOR>);
}
