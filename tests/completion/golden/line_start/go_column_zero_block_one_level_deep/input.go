package store

func (s *Store) Set(name string, n int) {
	if n < 0 {
		n = 0
	}
<CURSOR>
}
