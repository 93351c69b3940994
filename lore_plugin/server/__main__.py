from .tools import main

main()
