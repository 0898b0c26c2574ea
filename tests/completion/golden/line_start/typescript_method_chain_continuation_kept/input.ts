function names(users: User[]): string[] {
	return users
	<CURSOR>
}
