print("naïve café", fmt(<CURSOR>))
