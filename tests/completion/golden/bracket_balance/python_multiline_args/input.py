result = compute(
    <CURSOR>
)
