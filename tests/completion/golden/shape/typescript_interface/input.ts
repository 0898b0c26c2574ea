interface Point {<CURSOR>
