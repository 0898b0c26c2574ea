class A {
    void f() {
        System.out.println(<CURSOR>);
    }
}
