"""Selection: stratification, versioned benchmark splits and the Balance2 SFT mixture."""
