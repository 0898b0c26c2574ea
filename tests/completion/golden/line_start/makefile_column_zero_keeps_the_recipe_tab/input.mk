CC = gcc
CFLAGS = -O2 -Wall

app: main.o util.o
<CURSOR>

clean:
	rm -f *.o app
