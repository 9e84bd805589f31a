return used()
