package store

type Store struct {
	items map[string]int
}

func (s *Store) Add(name string, n int) {
	if s.items == nil {
		s.items = make(map[string]int)
	}
	<CURSOR>
	s.count++
}
