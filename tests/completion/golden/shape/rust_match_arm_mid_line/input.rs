fn f(x: i32) -> i32 {
    match x {
        0 => <CURSOR>,
    }
}
