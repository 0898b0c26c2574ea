class Reader:
    def read(self, n):
        if n < 0:<CURSOR>
        return self.buf[:n]
