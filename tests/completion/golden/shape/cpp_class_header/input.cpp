class Stack {<CURSOR>
