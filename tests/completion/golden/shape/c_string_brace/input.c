int main() {
    printf("{<CURSOR>");
}
