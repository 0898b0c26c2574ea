import os


def load(path):<CURSOR>
