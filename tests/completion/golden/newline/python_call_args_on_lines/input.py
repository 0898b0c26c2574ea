async def main():
    agent = Agent(name="Assistant", instructions="Reply briefly.")
    result = <CURSOR>
    print(result.final_output)
