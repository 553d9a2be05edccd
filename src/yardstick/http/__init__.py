"""What every HTTP route of the platform shares, whatever door it belongs to: who is calling (one bearer
parse, one authentication), and the route class through which a front door renders its own refusals."""
