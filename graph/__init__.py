"""eyas."""
