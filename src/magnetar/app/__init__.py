"""magnetar.app"""
