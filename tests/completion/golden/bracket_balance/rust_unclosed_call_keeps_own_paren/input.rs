fn f() {
    let v = vec![1, 2];
    println!("{}", <CURSOR>
}
