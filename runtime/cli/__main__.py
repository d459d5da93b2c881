from .entry import main

if __name__ == "__main__":  # not when a spawned helper process imports the parent's main module
    main()
